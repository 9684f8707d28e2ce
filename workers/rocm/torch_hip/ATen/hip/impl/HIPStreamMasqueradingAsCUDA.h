// A ROCm torch header as hipify names it; only its declarations, for parsing (flopwatch_torch_hip.h).
#pragma once
#include <flopwatch_torch_hip.h>
