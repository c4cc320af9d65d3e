//! [`Bdf`]: a PCI address (domain, bus, device, function), as sysfs spells it.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// A PCI function's address: `DDDD:BB:DD.F`, the name of its directory in
/// `/sys/bus/pci/devices`.
///
/// ```
/// use ringfab_vfio::Bdf;
/// let bdf: Bdf = "03:00.0".parse().unwrap();
/// assert_eq!(bdf.to_string(), "0000:03:00.0");
/// assert!("03:20.0".parse::<Bdf>().is_err(), "device numbers stop at 0x1f");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Bdf {
    /// PCI segment (domain), 0 on most machines.
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number, 0..=0x1f.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl Bdf {
    /// Parses `DDDD:BB:DD.F` or the short `BB:DD.F` (domain 0), hex digits in either case.
    ///
    /// # Errors
    /// [`Error::BadAddress`] naming the input, if it is neither form or a field is out of range.
    pub fn parse(input: &str) -> Result<Bdf, Error> {
        let bad = || Error::BadAddress {
            input: input.to_owned(),
        };
        let s = input.trim();
        let mut parts: Vec<&str> = s.split(':').collect();
        let (domain, bus) = match parts.len() {
            2 => ("0", parts.remove(0)),
            3 => (parts.remove(0), parts.remove(0)),
            _ => return Err(bad()),
        };
        let (device, function) = parts[0].split_once('.').ok_or_else(bad)?;
        let field = |text: &str, max_digits: usize, max: u32| -> Result<u32, Error> {
            if text.is_empty()
                || text.len() > max_digits
                || !text.bytes().all(|b| b.is_ascii_hexdigit())
            {
                return Err(bad());
            }
            let v = u32::from_str_radix(text, 16).map_err(|_| bad())?;
            if v > max {
                return Err(bad());
            }
            Ok(v)
        };
        // Field widths are fixed by the PCI spec: 8-bit bus, 5-bit device, 3-bit function.
        Ok(Bdf {
            domain: field(domain, 4, 0xffff)? as u16,
            bus: field(bus, 2, 0xff)? as u8,
            device: field(device, 2, 0x1f)? as u8,
            function: field(function, 1, 7)? as u8,
        })
    }
}

impl FromStr for Bdf {
    type Err = Error;
    fn from_str(s: &str) -> Result<Bdf, Error> {
        Bdf::parse(s)
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_short_forms_name_the_same_function() {
        let full = Bdf::parse("0000:03:00.0").unwrap();
        assert_eq!(Bdf::parse("03:00.0").unwrap(), full);
        assert_eq!(
            full,
            Bdf {
                domain: 0,
                bus: 3,
                device: 0,
                function: 0
            }
        );
        assert_eq!(
            Bdf::parse("ABCD:FF:1f.7").unwrap().to_string(),
            "abcd:ff:1f.7"
        );
    }

    #[test]
    fn malformed_or_out_of_range_addresses_are_refused() {
        for bad in [
            "",
            "03:00",
            "3.0",
            "0000:03:00.8",
            "0000:03:20.0",
            "00000:03:00.0",
            "0000:103:00.0",
            "0000:03:00.",
            "0000:03:0g.0",
            "1:2:3:4.0",
            "+3:00.0",
        ] {
            let err = Bdf::parse(bad).unwrap_err();
            assert!(
                err.to_string().contains("is not a PCI address"),
                "{bad}: {err}"
            );
        }
    }
}
