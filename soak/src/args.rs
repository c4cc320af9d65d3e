//! The command line: `--ops N --seed S --nic igb|e1000e|virtio-net|all --faults PER_MILLE`.

use crate::faults::Model;

/// What the command was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// Data operations in all, shared evenly by the models (the first ones take the
    /// remainder).
    pub ops: u64,
    /// The seed.
    pub seed: u64,
    /// The models, in order.
    pub models: Vec<Model>,
    /// Chance of a fault before each operation, per mille.
    pub fault_per_mille: u16,
}

/// The usage line.
pub const USAGE: &str = "usage: ringfab-soak [--ops N] [--seed S] \
                         [--nic igb|e1000e|virtio-net|all] [--faults PER_MILLE]";

impl Default for Args {
    fn default() -> Self {
        Args {
            ops: 300_000,
            seed: 1,
            models: Model::ALL.to_vec(),
            fault_per_mille: 10,
        }
    }
}

impl Args {
    /// Parses the arguments after the program's name.
    ///
    /// # Errors
    /// What is wrong with them, for the user.
    pub fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut a = Args::default();
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or(format!("{flag} needs a value"));
            match flag.as_str() {
                "--ops" => a.ops = number(&value()?)?,
                "--seed" => a.seed = number(&value()?)?,
                "--faults" => {
                    a.fault_per_mille = number(&value()?)?
                        .try_into()
                        .ok()
                        .filter(|&p: &u16| p <= 1000)
                        .ok_or("--faults is per mille: 0 to 1000")?
                }
                "--nic" => {
                    let v = value()?;
                    a.models = match v.as_str() {
                        "all" => Model::ALL.to_vec(),
                        name => vec![Model::ALL
                            .into_iter()
                            .find(|m| m.name() == name)
                            .ok_or(format!("unknown NIC {name}"))?],
                    }
                }
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown argument {other}\n{USAGE}")),
            }
        }
        Ok(a)
    }

    /// The operations model `i` of [`models`](Self::models) runs.
    pub fn ops_of(&self, i: usize) -> u64 {
        let n = self.models.len() as u64;
        self.ops / n + u64::from((i as u64) < self.ops % n)
    }
}

/// A decimal number, `_` allowed between digits, or a power of ten as `1e7`.
fn number(s: &str) -> Result<u64, String> {
    let bad = || format!("not a number: {s}");
    if let Some((m, e)) = s.split_once('e') {
        let (m, e): (u64, u32) = (m.parse().map_err(|_| bad())?, e.parse().map_err(|_| bad())?);
        return 10u64
            .checked_pow(e)
            .and_then(|p| p.checked_mul(m))
            .ok_or_else(bad);
    }
    s.replace('_', "").parse().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        Args::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_parse_and_ops_are_shared_by_the_models() {
        let a = parse("--ops 1e7 --seed 9 --nic all --faults 30").unwrap();
        assert_eq!((a.ops, a.seed, a.fault_per_mille), (10_000_000, 9, 30));
        assert_eq!(
            (0..3).map(|i| a.ops_of(i)).collect::<Vec<_>>(),
            [3_333_334, 3_333_333, 3_333_333]
        );
        assert_eq!(parse("--nic e1000e").unwrap().models, [Model::E1000e]);
    }

    #[test]
    fn bad_arguments_are_refused_by_name() {
        assert!(parse("--nic tulip").unwrap_err().contains("tulip"));
        assert!(parse("--ops").unwrap_err().contains("--ops"));
        assert!(parse("--faults 2000").is_err());
    }
}
