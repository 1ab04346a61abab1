// The reference API's header name, for kernels that include it: BE::Tensor,
// BE_CHECK and friends come with polykernel.h (see polykernel_be.h).
#pragma once
#include "polykernel.h"
