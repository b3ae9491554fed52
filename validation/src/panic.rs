//! The message of a caught panic, for the simulations correlate and kernel cases run under
//! `catch_unwind`.

/// The message of a caught panic.
pub fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
