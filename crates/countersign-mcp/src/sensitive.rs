//! Secrets in memory: a wrapper that never prints or serialises its content.

/// A value that must not leak: `Debug` prints `<redacted>` and there is deliberately no
/// `Serialize`/`Display`, so it cannot end up in logs, IPC payloads, the ledger or panics.
#[derive(Clone, PartialEq, Eq)]
pub struct Sensitive<T>(T);

impl<T> Sensitive<T> {
    /// Wraps a secret.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Sensitive<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let token = Sensitive::new("s3cr3t".to_owned());
        assert_eq!(format!("{token:?}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(token)), "Some(<redacted>)");
    }
}
