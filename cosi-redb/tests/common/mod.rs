//! A redb state in a temporary directory that lives as long as the state.

#![allow(dead_code)] // Each test file uses part of this.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use cosi::state::{
    CreateOptions, DestroyOptions, InProcess, ListOptions, UpdateOptions, Watch, WatchKindOptions, WatchOptions,
};
use cosi::{DynamicResource, Kind, Pointer, State};
use cosi_redb::{EncryptionKey, Options, RedbState};
use tempfile::TempDir;

pub const KEY: [u8; 32] = *b"0123456789abcdef0123456789abcdef";

/// A fresh directory for store files.
pub fn dir() -> TempDir {
    tempfile::tempdir().expect("cannot create a temporary directory")
}

/// The store file in `dir`.
pub fn file(dir: &Path) -> PathBuf {
    dir.join("state.redb")
}

/// Options with the test key.
pub fn encrypted() -> Options {
    Options::default().encryption_key(EncryptionKey::new(KEY))
}

/// A store in a directory of its own, removed when the state is dropped.
pub struct TempState {
    // Declared first, so the store closes before its directory goes.
    pub state: RedbState,
    pub dir: TempDir,
}

impl TempState {
    pub fn new(options: Options) -> Self {
        let dir = dir();
        let state = RedbState::open(file(dir.path()), options).expect("cannot open a fresh store");
        TempState { state, dir }
    }
}

#[async_trait]
impl State for TempState {
    async fn get_dynamic(&self, pointer: &Pointer) -> cosi::Result<DynamicResource> {
        self.state.get_dynamic(pointer).await
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> cosi::Result<Vec<DynamicResource>> {
        self.state.list_dynamic(kind, options).await
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> cosi::Result<DynamicResource> {
        self.state.create_dynamic(resource, options).await
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> cosi::Result<DynamicResource> {
        self.state.update_dynamic(resource, options).await
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> cosi::Result<()> {
        self.state.destroy_dynamic(pointer, options).await
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> cosi::Result<Watch> {
        self.state.watch_dynamic(pointer, options).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<Watch> {
        self.state.watch_kind_dynamic(kind, options).await
    }

    fn in_process(&self) -> Option<&dyn InProcess> {
        self.state.in_process()
    }
}
