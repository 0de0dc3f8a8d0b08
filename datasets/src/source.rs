//! What a dataset argument on the command line means: a path, or `synthetic:<preset>`.

use std::path::PathBuf;

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::loaders::{load_path, LoadOptions};
use crate::progress::Progress;
use crate::synthetic::{generate, Preset};

/// A parsed dataset argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A file or folder in one of the [`crate::Format`]s.
    Path(PathBuf),
    /// `synthetic:<preset>[,scale=S][,seed=N]`
    Synthetic {
        /// The parameter set.
        preset: Preset,
        /// Multiplies the preset's vertex and edge counts (1 when not given).
        scale: f64,
        /// Seeds the generator (0 when not given).
        seed: u64,
    },
}

impl std::str::FromStr for Source {
    type Err = Error;

    fn from_str(arg: &str) -> Result<Source> {
        let Some(rest) = arg.strip_prefix("synthetic:") else {
            return Ok(Source::Path(PathBuf::from(arg)));
        };
        let mut parts = rest.split(',');
        let preset = Preset::from_name(parts.next().unwrap_or_default())?;
        let (mut scale, mut seed) = (1.0, 0);
        for part in parts {
            let bad = || {
                Error::Usage(format!(
                    "`{part}` in `{arg}`: expected scale=<number> or seed=<integer>"
                ))
            };
            match part.split_once('=') {
                Some(("scale", v)) => scale = v.parse().map_err(|_| bad())?,
                Some(("seed", v)) => seed = v.parse().map_err(|_| bad())?,
                _ => return Err(bad()),
            }
        }
        Ok(Source::Synthetic {
            preset,
            scale,
            seed,
        })
    }
}

impl Source {
    /// Read or generate the dataset.
    pub fn load(&self, options: &LoadOptions, progress: &dyn Progress) -> Result<Dataset> {
        match self {
            Source::Path(path) => load_path(path, options),
            Source::Synthetic {
                preset,
                scale,
                seed,
            } => generate(&preset.spec(*scale, *seed)?, progress),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_and_synthetic_specs() {
        assert_eq!(
            "data/cora.npz".parse::<Source>().unwrap(),
            Source::Path("data/cora.npz".into())
        );
        assert_eq!(
            "synthetic:reddit-like,scale=0.5,seed=9"
                .parse::<Source>()
                .unwrap(),
            Source::Synthetic {
                preset: Preset::RedditLike,
                scale: 0.5,
                seed: 9
            }
        );
        assert!("synthetic:small,speed=3".parse::<Source>().is_err());
        assert!("synthetic:huge".parse::<Source>().is_err());
    }
}
