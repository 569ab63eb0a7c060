//! Writes test-only Filecoin parameters, for timing the setup and for CI until
//! the daemon's `cuzk params generate` exists:
//! `generate_params <sector bytes> <kind,kind,...> <out dir> [--force]`.

use std::path::Path;

use cuzk_filecoin::{generate, Kind};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [size, kinds, out, rest @ ..] = &args[..] else {
        return Err(
            "usage: generate_params <sector bytes> <porep,winning,window,snap> <out dir> [--force]"
                .into(),
        );
    };
    let kinds = kinds
        .split(',')
        .map(str::parse)
        .collect::<Result<Vec<Kind>, _>>()?;
    let force = rest.iter().any(|a| a == "--force");
    for file in generate(size.parse()?, &kinds, Path::new(out), force)? {
        println!("{} {} {}", file.kind, file.bytes, file.path.display());
    }
    Ok(())
}
