// The simulated device's CUB (see cub_sim.cuh).
#pragma once
#include "../cub_sim.cuh"
