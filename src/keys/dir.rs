//! The key directory, `<data_dir>/keys`: each shape's proving key (`.pk`,
//! uncompressed) and verifying key (`.vk`, compressed) as files, each
//! written atomically, and the directory made again, with its permissions
//! at start, if it was removed while the daemon runs.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ark_groth16::{ProvingKey, VerifyingKey};
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use cuzk_kernels::Bls12_381;
use sha2::{Digest, Sha256};

use super::error::{OpenError, PrepareError};

pub(super) struct KeyDir {
    /// `<data_dir>/keys`.
    dir: PathBuf,
    /// `dir`'s permissions at start: a directory removed while the daemon
    /// runs is created again with them (`make`), not with the umask's, so
    /// that an operator's narrower mode survives the removal.
    permissions: fs::Permissions,
}

impl KeyDir {
    /// `<data_dir>/keys`, created if it is not there.
    pub(super) fn open(data_dir: &Path) -> Result<Self, OpenError> {
        let dir = data_dir.join("keys");
        let permissions = fs::create_dir_all(&dir)
            .and_then(|_| fs::metadata(&dir))
            .map_err(|error| OpenError::Dir { path: dir.clone(), error })?
            .permissions();
        Ok(Self { dir, permissions })
    }

    pub(super) fn path(&self) -> &Path {
        &self.dir
    }

    pub(super) fn pk_path(&self, circuit_id: &str) -> PathBuf {
        self.dir.join(format!("{circuit_id}.pk"))
    }

    fn vk_path(&self, circuit_id: &str) -> PathBuf {
        self.dir.join(format!("{circuit_id}.vk"))
    }

    /// The circuit ids with a verifying key file.
    pub(super) fn ids(&self) -> BTreeSet<String> {
        fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".vk").map(str::to_string))
            .collect()
    }

    /// A verifying key file's bytes, if there is one.
    pub(super) fn read_vk(&self, circuit_id: &str) -> Option<Vec<u8>> {
        fs::read(self.vk_path(circuit_id)).ok()
    }

    /// The proving key in a shape's key file.
    pub(super) fn read_pk(&self, id: &str) -> Result<ProvingKey<Bls12_381>, PrepareError> {
        let path = self.pk_path(id);
        let bytes = fs::read(&path).map_err(|error| PrepareError::File { doing: "read", path, error })?;
        // Our own file, written atomically (or downloaded and checked
        // against its digest): skip the subgroup checks that would make
        // loading a large key slow.
        ProvingKey::<Bls12_381>::deserialize_uncompressed_unchecked(&bytes[..])
            .map_err(|error| PrepareError::Unreadable { id: id.into(), error })
    }

    /// Whether a shape's key file is the one of this digest.
    pub(super) fn holds(&self, id: &str, sha256: [u8; 32]) -> bool {
        file_sha256(&self.pk_path(id)).ok() == Some(sha256)
    }

    /// Both key files of a shape.
    pub(super) fn write(&self, id: &str, pk: &ProvingKey<Bls12_381>) -> Result<(), PrepareError> {
        let mut bytes = Vec::new();
        pk.serialize_uncompressed(&mut bytes)
            .map_err(|error| PrepareError::Serialize { id: id.into(), error })?;
        self.make()?;
        write_atomically(&self.pk_path(id), &bytes)?;
        self.write_vk(id, &vk_bytes(id, &pk.vk)?)
    }

    /// A shape's verifying key file, from its stored bytes.
    pub(super) fn write_vk(&self, id: &str, bytes: &[u8]) -> Result<(), PrepareError> {
        self.make()?;
        write_atomically(&self.vk_path(id), bytes)
    }

    /// Creates the key directory again, with its permissions at start, if
    /// it was removed while the daemon runs (with the data directory, say:
    /// the job store writes itself back there, `store/open.rs`), so that
    /// the next key written does not fail. Keys that went with it are set
    /// up again when a job needs one that is not in memory.
    pub(super) fn make(&self) -> Result<(), PrepareError> {
        if self.dir.is_dir() {
            return Ok(());
        }
        let error = |error| PrepareError::File { doing: "create", path: self.dir.clone(), error };
        if let Some(parent) = self.dir.parent() {
            fs::create_dir_all(parent).map_err(error)?;
        }
        // Made with the mode (less the umask) from the start, then set to
        // exactly it: never wider than it is to be, even for a moment.
        match fs::DirBuilder::new().mode(self.permissions.mode()).create(&self.dir) {
            Ok(()) => {
                fs::set_permissions(&self.dir, self.permissions.clone()).map_err(error)?;
                log::warn!(
                    "the key directory {} was gone; created it again (a key it held is set up, in a fleet copied, again when a job needs it)",
                    self.dir.display()
                );
                Ok(())
            }
            // Another setup's thread made it meanwhile.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && self.dir.is_dir() => Ok(()),
            Err(e) => Err(error(e)),
        }
    }
}

/// A verifying key as it is stored and served: compressed.
pub(super) fn vk_bytes(id: &str, vk: &VerifyingKey<Bls12_381>) -> Result<Vec<u8>, PrepareError> {
    let mut bytes = Vec::new();
    vk.serialize_compressed(&mut bytes).map_err(|error| PrepareError::Serialize { id: id.into(), error })?;
    Ok(bytes)
}

/// A file's SHA-256, read a buffer at a time (a key file can be larger
/// than the memory to spare).
fn file_sha256(path: &Path) -> io::Result<[u8; 32]> {
    let mut digest = Sha256::new();
    io::copy(&mut fs::File::open(path)?, &mut digest)?;
    Ok(digest.finalize().into())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), PrepareError> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes)
        .and_then(|_| fs::File::open(&tmp)?.sync_all())
        .and_then(|_| fs::rename(&tmp, path))
        .map_err(|error| PrepareError::File { doing: "write", path: path.to_path_buf(), error })
}
