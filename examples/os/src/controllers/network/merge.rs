//! The three merges of the layers in `network-config` into `network`.

use cosi::controller::Merge;
use cosi::prelude::*;

use crate::controllers::MERGES;
use crate::resources::{AddressSpec, HostnameSpec, NETWORK, NETWORK_CONFIG, ResolverSpec};

/// `network.HostnameMergeController`: the highest layer's hostname wins.
pub fn hostname_merge() -> Merge<HostnameSpec> {
    Merge::new(MERGES[0], NETWORK_CONFIG, NETWORK, |spec: &Typed<HostnameSpec>| {
        ("hostname".to_owned(), spec.layer.rank())
    })
}

/// `network.ResolverMergeController`: the highest layer with nameservers
/// gives them; search domains add up, lowest layer first.
pub fn resolver_merge() -> Merge<ResolverSpec> {
    Merge::new(MERGES[1], NETWORK_CONFIG, NETWORK, |spec: &Typed<ResolverSpec>| {
        ("resolvers".to_owned(), spec.layer.rank())
    })
    .with_merge(|merged: &mut ResolverSpec, layer: &ResolverSpec| {
        if !layer.nameservers.is_empty() {
            merged.nameservers.clone_from(&layer.nameservers);
            merged.layer = layer.layer;
        }
        for domain in &layer.search_domains {
            if !merged.search_domains.contains(domain) {
                merged.search_domains.push(domain.clone());
            }
        }
    })
}

/// `network.AddressMergeController`: one address per link and CIDR, from the highest layer.
pub fn address_merge() -> Merge<AddressSpec> {
    Merge::new(MERGES[2], NETWORK_CONFIG, NETWORK, |spec: &Typed<AddressSpec>| (spec.merged_id(), spec.layer.rank()))
}
