//! gpusim-reports
