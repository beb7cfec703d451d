// block.hpp is header-only today; this unit keeps the arena's storage policy in one object file
// so a future lock-free arena has a home. (Nothing else lives here.)
#include "block.hpp"
