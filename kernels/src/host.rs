//! What the host machine has, for budgets sized to it by default (the
//! daemon's memory budget, the CUDA engine's pinned budget).

/// The host's physical memory in bytes (Linux: MemTotal of /proc/meminfo);
/// None where that cannot be read.
pub fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn physical_memory_is_read_where_linux_reports_it() {
        if std::path::Path::new("/proc/meminfo").exists() {
            let bytes = super::physical_memory().expect("MemTotal parses");
            assert!(bytes >= 1 << 20 && bytes.is_multiple_of(1024), "{bytes}");
        }
    }
}
