//! gpusim-workloads
