/* Must not compile: library folders do not see the CLI. */
#include "cli/commands.h"
int cb_probe;
