#pragma once
// A fixture for the layering check: a kernel that includes the model above it.
#include "gpu/model/model_config.hpp"
