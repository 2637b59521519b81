//! "What can I do?" (SPEC §8): Kubernetes' own answer, per resource and verb, asked as
//! the principal with SelfSubjectAccessReviews.

use banlieue_domain::views::AccessRow;
use cluster::impersonation::may;

use crate::roles::{CUSTOM_ROLE_RESOURCES as RESOURCES, CUSTOM_ROLE_VERBS as VERBS};
use crate::{Console, Principal, Result, ServiceError};

impl Console {
    /// The matrix: for each banlieue resource a custom role may grant, whether each of its
    /// verbs is allowed in every namespace. Empty without a cluster.
    ///
    /// Errors: a review Kubernetes did not answer ([`ServiceError::Unavailable`] or its
    /// refusal).
    pub async fn access(&self, who: &Principal) -> Result<Vec<AccessRow>> {
        let client = match self.client(who).await {
            Err(ServiceError::NoCluster) => return Ok(Vec::new()),
            other => other?,
        };
        let mut rows = Vec::with_capacity(RESOURCES.len());
        for resource in RESOURCES {
            let answers =
                futures::future::try_join_all(VERBS.map(|verb| may(&client, resource, verb, None)))
                    .await?;
            rows.push(AccessRow {
                resource: resource.to_owned(),
                verbs: VERBS
                    .iter()
                    .zip(answers)
                    .map(|(verb, allowed)| ((*verb).to_owned(), allowed))
                    .collect(),
            });
        }
        Ok(rows)
    }
}
