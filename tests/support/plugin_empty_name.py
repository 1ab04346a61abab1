"""A plugin module whose ``Backend(name="")`` is refused when it is made."""

import polykernel as pk

BACKEND = pk.Backend(name="")
