//! The `meta` namespace: which namespaces exist and which resource types are defined.

use serde::{Deserialize, Serialize};

use crate::resource::{DynamicResource, Resource, ResourceDefinition, Typed};
use crate::state::{CreateOptions, Error, Result, State, UpdateOptions};

/// The namespace that holds [`Namespace`] and [`ResourceDefinition`] resources.
pub const META_NAMESPACE: &str = "meta";

/// The owner of everything in the `meta` namespace.
pub const META_OWNER: &str = "meta";

/// The description of the `meta` namespace, as Go COSI registers it.
pub(crate) const META_DESCRIPTION: &str = "Metadata namespace which contains resource and namespace definitions.";

/// A namespace, published in the `meta` namespace with its name as ID.
#[derive(cosi::Resource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[resource(type = "Namespaces.meta.cosi.dev", namespace = "meta", aliases = ["ns"])]
pub struct Namespace {
    /// What the namespace holds.
    pub description: String,
}

/// Publishes namespaces and resource definitions into the `meta` namespace of a state,
/// so clients can list them and resolve aliases.
///
/// Registering is idempotent: registering the same thing again changes nothing,
/// and registering a changed definition updates it.
#[derive(Debug)]
pub struct Registry<'a, S: ?Sized> {
    state: &'a S,
}

impl<'a, S: State + ?Sized> Registry<'a, S> {
    /// A registry writing into `state`.
    pub fn new(state: &'a S) -> Self {
        Registry { state }
    }

    /// Registers the `meta` namespace and the definitions of its two types.
    pub async fn register_defaults(&self) -> Result<()> {
        self.register_namespace(META_NAMESPACE, META_DESCRIPTION).await?;
        self.register::<ResourceDefinition>().await?;
        self.register::<Namespace>().await
    }

    /// Registers a namespace.
    pub async fn register_namespace(&self, name: &str, description: &str) -> Result<()> {
        crate::resource::validate_name("namespace", name).map_err(Error::InvalidArgument)?;
        let namespace = Typed::new(name, Namespace { description: description.to_owned() });
        self.put(namespace.into()).await
    }

    /// Registers the definition of resource type `T`.
    pub async fn register<T: Resource>(&self) -> Result<()> {
        self.register_definition(T::definition()).await
    }

    /// Registers a definition built at run time.
    pub async fn register_definition(&self, definition: ResourceDefinition) -> Result<()> {
        let id = definition.id();
        self.put(Typed::new(id, definition).into()).await
    }

    async fn put(&self, resource: DynamicResource) -> Result<()> {
        match self.state.create_dynamic(resource.clone(), CreateOptions::owner(META_OWNER)).await {
            Ok(_) => Ok(()),
            Err(Error::AlreadyExists(_)) => {
                update_spec(self.state, &resource).await?;
                Ok(())
            }
            Err(err) => Err(err),
        }
    }
}

/// Gives the stored resource at `resource`'s pointer `resource`'s spec.
async fn update_spec<S: State + ?Sized>(state: &S, resource: &DynamicResource) -> Result<()> {
    let pointer = resource.metadata().pointer();
    crate::state::ext::update_with(state, pointer, UpdateOptions::owner(META_OWNER), |stored| {
        *stored = resource.with_metadata(stored.metadata().clone());
        Ok::<_, Error>(())
    })
    .await?;
    Ok(())
}
