//! The collections of resource types, by the type's number: found with two
//! loads, without the state's map, its lock or a hash of the names.
//!
//! A collection goes in once it was written or loaded from the store, which
//! is for good: a collection is freed only while it holds nothing and has
//! never been written (see `Collection::release`), so one found here stays in
//! the map for as long as the state lives. Until then, and for kinds given by
//! name at run time, the map finds it.

use std::sync::{Arc, OnceLock};

use super::collection::Collection;

/// Segment `s` holds the numbers `2^s - 1 .. 2^(s+1) - 1`; a program with
/// more resource types than the 16,777,215 these hold finds the others by name.
const SEGMENTS: usize = 24;

/// A table by type number that only grows: a segment is allocated at its
/// first entry and never moves, so readers take no lock.
pub(super) struct ByType {
    segments: [OnceLock<Segment>; SEGMENTS],
}

/// The collections of one segment's numbers, each set once.
type Segment = Box<[OnceLock<Arc<Collection>>]>;

impl Default for ByType {
    fn default() -> Self {
        ByType { segments: std::array::from_fn(|_| OnceLock::new()) }
    }
}

impl std::fmt::Debug for ByType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.segments.iter().filter_map(OnceLock::get).flatten().filter(|entry| entry.get().is_some());
        f.debug_struct("ByType").field("len", &entries.count()).finish()
    }
}

/// The segment of a type number and its place there.
fn place(index: u32) -> Option<(usize, usize)> {
    let number = u64::from(index) + 1;
    let segment = number.ilog2() as usize;
    (segment < SEGMENTS).then(|| (segment, (number - (1 << segment)) as usize))
}

impl ByType {
    /// The collection of the type numbered `index`, once it was written or loaded.
    pub(super) fn get(&self, index: u32) -> Option<&Arc<Collection>> {
        let (segment, offset) = place(index)?;
        self.segments[segment].get()?[offset].get()
    }

    /// Keeps `collection`, which was written or loaded, as the type's.
    pub(super) fn insert(&self, index: u32, collection: &Arc<Collection>) {
        let Some((segment, offset)) = place(index) else {
            return;
        };
        let entries = self.segments[segment].get_or_init(|| (0..1usize << segment).map(|_| OnceLock::new()).collect());
        entries[offset].get_or_init(|| Arc::clone(collection));
    }
}

#[cfg(test)]
mod tests {
    use super::place;

    #[test]
    fn every_number_has_its_own_place() {
        let places: Vec<_> = [0, 1, 2, 3, 6, 7].map(place).into_iter().flatten().collect();
        assert_eq!(places, [(0, 0), (1, 0), (1, 1), (2, 0), (2, 3), (3, 0)]);
        assert_eq!(place((1 << 24) - 2), Some((23, (1 << 23) - 1)));
        assert_eq!(place((1 << 24) - 1), None);
        assert_eq!(place(u32::MAX), None);
    }
}
