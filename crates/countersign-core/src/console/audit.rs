//! The audit log: reading it and exporting it to a file.

use std::path::PathBuf;

use crate::ledger::audit;

use super::view::{AuditEntry, AuditExport, AuditFormat};
use super::{present, Console, Error, Result};

impl Console {
    /// The audit log, oldest first.
    pub async fn audit(&self) -> Result<Vec<AuditEntry>> {
        Ok(self
            .read(audit::list)
            .await?
            .iter()
            .map(present::audit)
            .collect())
    }

    /// Writes the audit log to a file in `dir` (`exports/` in the data directory when `None`).
    pub async fn audit_export(
        &self,
        format: AuditFormat,
        dir: Option<PathBuf>,
    ) -> Result<AuditExport> {
        let records = self.read(audit::list).await?;
        let dir = dir.unwrap_or_else(|| self.data_dir.join("exports"));
        let stamp = time::OffsetDateTime::now_utc()
            .format(time::macros::format_description!(
                "[year][month][day]-[hour][minute][second]"
            ))
            .unwrap_or_else(|_| "now".into());
        let (ext, text) = match format {
            AuditFormat::Csv => ("csv", audit::to_csv(&records)),
            AuditFormat::Json => (
                "json",
                serde_json::to_string_pretty(&records)
                    .map_err(|e| Error::Invalid(format!("the audit log cannot be encoded: {e}")))?,
            ),
        };
        let path = dir.join(format!("countersign-audit-{stamp}.{ext}"));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        Ok(AuditExport {
            path: path.display().to_string(),
            records: records.len().min(u32::MAX as usize) as u32,
        })
    }
}
