//! gpusim-validation
