//! The resources of one collection: found by ID through a hash index, listed in ID order.
//!
//! A get or a write finds its resource with one hash of the ID and one
//! comparison, where an ordered map compares strings all the way down the
//! tree. Lists still come out sorted: the order of the resources is kept as a
//! list of slot numbers, sorted lazily. Writes only note what changed (a new
//! slot, an emptied one); the next list sorts what was added since the last
//! one and merges it in, so a list after `k` creates costs `k log k` on top of
//! walking the resources, and a list after updates only walks them.
//!
//! Each resource lives in a slot that does not change while it is stored; the
//! ID is stored once, in the resource itself (the index and the order hold
//! slot numbers). An emptied slot is reused only after the next sort has
//! dropped it from the order, so the order never names a slot that now holds
//! another ID.

use std::cmp::Ordering;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::resource::DynamicResource;
use crate::state::{Error, Result};

/// The most resources one collection holds: slot numbers are `u32`s, which halves the index.
const MAX_SLOTS: usize = u32::MAX as usize;

#[derive(Default)]
pub(super) struct Resources {
    /// Every stored resource, at its slot; `None` for an empty slot.
    slots: Vec<Option<DynamicResource>>,
    /// Slot numbers, hashed by their resource's ID.
    index: HashTable<u32>,
    /// Seeded at random per collection (foldhash): IDs come from clients, and
    /// a fixed hash would let one choose IDs that all collide.
    hasher: DefaultHashBuilder,
    /// Slots in ID order as of the last sort; may hold slots emptied since.
    sorted: Vec<u32>,
    /// Slots filled since the last sort, in no order; may hold slots emptied since.
    unsorted: Vec<u32>,
    /// Slots emptied since the last sort, reused only after the next one.
    vacated: Vec<u32>,
    /// Slots free for reuse: in neither `sorted` nor `unsorted`.
    free: Vec<u32>,
}

impl std::fmt::Debug for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resources").field("len", &self.len()).finish_non_exhaustive()
    }
}

impl Resources {
    /// How many resources are stored.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether none is stored.
    pub(super) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// How many more resources fit.
    pub(super) fn room(&self) -> usize {
        self.free.len() + self.vacated.len() + (MAX_SLOTS - self.slots.len())
    }

    /// The resource with this ID.
    pub(super) fn get(&self, id: &str) -> Option<&DynamicResource> {
        let hash = self.hasher.hash_one(id);
        let slot = self.index.find(hash, |&slot| self.id_at(slot) == Some(id))?;
        self.slots[*slot as usize].as_ref()
    }

    /// Stores a resource whose ID is not stored yet (the caller checked).
    ///
    /// Fails only when the collection already holds the most resources it can.
    pub(super) fn insert(&mut self, resource: DynamicResource) -> Result<()> {
        if self.free.is_empty() && !self.vacated.is_empty() && self.slots.len() >= MAX_SLOTS {
            self.sort();
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None if self.slots.len() < MAX_SLOTS => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
            None => {
                return Err(Error::backend(std::io::Error::other(format!(
                    "the collection of {} holds {MAX_SLOTS} resources, the most it can",
                    resource.metadata().kind()
                ))));
            }
        };
        let hash = self.hasher.hash_one(resource.id());
        self.slots[slot as usize] = Some(resource);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index.insert_unique(hash, slot, |&slot| hasher.hash_one(id_of(slots, slot).unwrap_or_default()));
        self.unsorted.push(slot);
        Ok(())
    }

    /// The slot of the resource with this ID, for [`replace`](Resources::replace).
    pub(super) fn slot_of(&self, id: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(id);
        self.index.find(hash, |&slot| self.id_at(slot) == Some(id)).copied()
    }

    /// The resource in `slot` (from [`slot_of`](Resources::slot_of), nothing removed since).
    pub(super) fn at(&self, slot: u32) -> Option<&DynamicResource> {
        self.slots.get(slot as usize)?.as_ref()
    }

    /// Replaces the stored resource with the same ID, found in `slot` when
    /// the caller has just looked it up; returns it, or `None` (and stores
    /// nothing) when there is none.
    pub(super) fn replace(&mut self, resource: DynamicResource, slot: Option<u32>) -> Option<DynamicResource> {
        let slot = match slot {
            Some(slot) => slot,
            None => self.slot_of(resource.id())?,
        };
        self.slots.get_mut(slot as usize)?.replace(resource)
    }

    /// Removes the resource with this ID; returns it.
    pub(super) fn remove(&mut self, id: &str) -> Option<DynamicResource> {
        let hash = self.hasher.hash_one(id);
        let entry = self.index.find_entry(hash, |&slot| id_of(&self.slots, slot) == Some(id)).ok()?;
        let (slot, _) = entry.remove();
        self.vacated.push(slot);
        let removed = self.slots[slot as usize].take();
        // Emptied slots wait for a sort before they are reused; without lists
        // they would pile up, so past as many as there are resources, sort now.
        if self.vacated.len() > self.len().max(64) {
            self.sort();
        }
        removed
    }

    /// The resources in ID order.
    pub(super) fn sorted(&mut self) -> impl ExactSizeIterator<Item = &DynamicResource> {
        if !self.unsorted.is_empty() || !self.vacated.is_empty() {
            self.sort();
        }
        let slots = &self.slots;
        // After a sort, every slot in the order holds a resource: the filter only states it.
        self.sorted.iter().filter_map(move |&slot| slots[slot as usize].as_ref()).exact(self.len())
    }

    /// Brings `sorted` up to date: drops emptied slots, sorts the new ones and merges them in.
    fn sort(&mut self) {
        let slots = &self.slots;
        let live = |slot: &u32| slots[*slot as usize].is_some();
        self.sorted.retain(live);
        self.unsorted.retain(live);
        let by_id = |a: &u32, b: &u32| id_of(slots, *a).cmp(&id_of(slots, *b));
        self.unsorted.sort_unstable_by(by_id);
        if self.sorted.is_empty() {
            std::mem::swap(&mut self.sorted, &mut self.unsorted);
        } else if !self.unsorted.is_empty() {
            let old = std::mem::take(&mut self.sorted);
            let mut merged = Vec::with_capacity(old.len() + self.unsorted.len());
            let (mut a, mut b) = (old.into_iter().peekable(), self.unsorted.drain(..).peekable());
            loop {
                let next = match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) => match by_id(x, y) {
                        Ordering::Greater => b.next(),
                        Ordering::Less | Ordering::Equal => a.next(),
                    },
                    (Some(_), None) => a.next(),
                    (None, Some(_)) => b.next(),
                    (None, None) => break,
                };
                merged.extend(next);
            }
            self.sorted = merged;
        }
        self.free.append(&mut self.vacated);
    }

    fn id_at(&self, slot: u32) -> Option<&str> {
        id_of(&self.slots, slot)
    }
}

fn id_of(slots: &[Option<DynamicResource>], slot: u32) -> Option<&str> {
    slots.get(slot as usize)?.as_ref().map(|resource| resource.id())
}

/// An iterator whose length is known although it filters.
trait Exact: Iterator + Sized {
    fn exact(self, len: usize) -> ExactLen<Self> {
        ExactLen { inner: self, len }
    }
}

impl<I: Iterator> Exact for I {}

struct ExactLen<I> {
    inner: I,
    len: usize,
}

impl<I: Iterator> Iterator for ExactLen<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.inner.next()?;
        self.len = self.len.saturating_sub(1);
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactLen<I> {}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::resource::Metadata;

    fn resource(id: &str, version: u64) -> DynamicResource {
        let mut metadata = Metadata::new("ns", "Things.test.cosi.dev", id);
        metadata.set_version(crate::resource::Version::new(version));
        DynamicResource::without_spec(metadata)
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16),
        Replace(u16),
        Remove(u16),
        List,
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few IDs, so that removes and re-inserts of one ID are frequent.
        let id = 0u16..300;
        prop_oneof![
            4 => id.clone().prop_map(Op::Insert),
            2 => id.clone().prop_map(Op::Replace),
            3 => id.prop_map(Op::Remove),
            1 => Just(Op::List),
        ]
    }

    proptest! {
        /// Every operation agrees with an ordered map, and lists come out in ID order.
        #[test]
        fn agrees_with_an_ordered_map(ops in proptest::collection::vec(op(), 0..2000)) {
            let mut resources = Resources::default();
            let mut model: BTreeMap<String, u64> = BTreeMap::new();
            for (step, op) in ops.into_iter().enumerate() {
                let step = step as u64 + 1;
                match op {
                    Op::Insert(n) => {
                        let id = format!("r{n}");
                        if let std::collections::btree_map::Entry::Vacant(entry) = model.entry(id.clone()) {
                            resources.insert(resource(&id, step)).unwrap();
                            entry.insert(step);
                        }
                    }
                    Op::Replace(n) => {
                        let id = format!("r{n}");
                        let old = resources.replace(resource(&id, step), None);
                        prop_assert_eq!(old.map(|old| old.metadata().version().get()), model.get(&id).map(|v| Some(*v)));
                        if let Some(version) = model.get_mut(&id) {
                            *version = step;
                        }
                    }
                    Op::Remove(n) => {
                        let id = format!("r{n}");
                        let removed = resources.remove(&id);
                        prop_assert_eq!(removed.map(|old| old.metadata().version().get()), model.remove(&id).map(Some));
                    }
                    Op::List => {
                        let listed: Vec<(String, Option<u64>)> = resources
                            .sorted()
                            .map(|r| (r.id().to_owned(), r.metadata().version().get()))
                            .collect();
                        let expected: Vec<(String, Option<u64>)> =
                            model.iter().map(|(id, v)| (id.clone(), Some(*v))).collect();
                        prop_assert_eq!(listed, expected);
                    }
                }
                prop_assert_eq!(resources.len(), model.len());
                for (id, version) in &model {
                    prop_assert_eq!(resources.get(id).map(|r| r.metadata().version().get()), Some(Some(*version)));
                }
            }
            let listed: Vec<String> = resources.sorted().map(|r| r.id().to_owned()).collect();
            prop_assert_eq!(listed, model.keys().cloned().collect::<Vec<_>>());
            prop_assert_eq!(resources.sorted().len(), model.len());
        }
    }

    #[test]
    fn emptied_slots_are_reused_without_lists() {
        let mut resources = Resources::default();
        for round in 0..100 {
            for i in 0..50 {
                resources.insert(resource(&format!("r{i}"), round)).unwrap();
            }
            for i in 0..50 {
                assert!(resources.remove(&format!("r{i}")).is_some());
            }
        }
        assert!(resources.is_empty());
        // 50 live at most, and emptied slots wait for at most max(len, 64) before reuse.
        assert!(resources.slots.len() <= 50 + 65, "{} slots for 50 resources", resources.slots.len());
    }
}
