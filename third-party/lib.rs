//! Empty: this package only lists the third-party crates of the Buck2 build.
