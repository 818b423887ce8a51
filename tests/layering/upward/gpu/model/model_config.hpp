#pragma once
// A fixture for the layering check (see ../kernels/upward.hpp).
