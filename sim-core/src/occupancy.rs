//! How many CTAs of a kernel fit on one SM at once: the calculator lives in
//! [`gpusim_configs::occupancy`] (so that trace generators, which do not depend on sim-core, use
//! the same rules); re-exported here unchanged.

pub use gpusim_configs::occupancy::{Limiter, Occupancy, occupancy};
