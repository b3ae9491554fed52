//! gpusim-sim-core
