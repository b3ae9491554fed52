//! The `gpusim` executable; the command line itself is the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    gpusim::main()
}
