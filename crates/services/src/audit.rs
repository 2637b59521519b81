//! The one place actions are audited: every use case that changes something passes its
//! outcome through [`Console::audited`], allowed or refused.

use crate::{Console, Principal, Result, ServiceError};

impl Console {
    /// Records that `who` attempted `action` on `target` with `outcome` (`success`, or the
    /// refusal's [`ServiceError::audit_result`] with its reason as the detail), then
    /// returns `outcome`.
    pub(crate) async fn audited<T>(
        &self,
        who: &Principal,
        action: &str,
        target: &str,
        outcome: Result<T>,
    ) -> Result<T> {
        let (result, detail) = match &outcome {
            Ok(_) => ("success", String::new()),
            // The cause of a failure goes to the log with its correlation id, not here.
            Err(error @ ServiceError::Unavailable { .. }) => (error.audit_result(), String::new()),
            Err(error) => (error.audit_result(), error.to_string()),
        };
        self.accounts
            .audit_event(&who.name(), action, target, who.address(), result, &detail)
            .await;
        outcome
    }
}
