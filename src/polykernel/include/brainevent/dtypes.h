// The reference API's header name, for kernels that include it: polykernel.h
// (BE::Tensor, BE_CHECK, BE_DISPATCH_*) plus the half-precision types.
#pragma once
#include "polykernel.h"
#include "polykernel_half.h"
