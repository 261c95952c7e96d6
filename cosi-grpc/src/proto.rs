//! The code generated from `proto/v1alpha1/*.proto` (COSI's specification v1alpha1).
//!
//! `cosi.resource` holds the resources, queries and the `State` service;
//! [`meta`] the specs of the `meta` namespace, which Go clients decode from
//! their protobuf form.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("cosi.resource");

/// The specs of the `meta` namespace (`cosi.resource.meta`).
pub mod meta {
    tonic::include_proto!("cosi.resource.meta");
}
