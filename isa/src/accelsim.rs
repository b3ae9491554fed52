//! Placeholder: filled in by the trace-format work.
