//! A token bucket on the domain's clock ([`TokenBucket`]): how often this host sends ICMP error
//! messages. RFC 1122 §3.2.2 allows it ("a host MAY limit the rate at which it sends ICMP
//! error messages") and RFC 1812 §4.3.2.8 recommends a token bucket for it, so that a scan of
//! closed ports cannot make the host flood the link with answers.
//!
//! [`UNREACHABLE`]: a burst of 10, then one answer per 100 ms (10 a second) — well under the
//! link's rate, and more than a program that sends to a closed port by mistake needs to learn
//! of it (Linux's default, `icmp_ratelimit`, allows one a second per destination; this one
//! bucket serves every destination).

use core::time::Duration;

/// Tokens refilled one per `interval` up to `burst`; each answer takes one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TokenBucket {
    burst: u32,
    interval: Duration,
    tokens: u32,
    /// When the last token was counted in (refills are counted from here).
    last: Duration,
}

/// The port-unreachable bucket's settings: a burst of 10, one more every 100 ms.
pub const UNREACHABLE: TokenBucket = TokenBucket::full(10, Duration::from_millis(100));

impl TokenBucket {
    /// A full bucket of `burst` tokens, one refilled per `interval`, as of time 0.
    pub const fn full(burst: u32, interval: Duration) -> Self {
        TokenBucket {
            burst,
            interval,
            tokens: burst,
            last: Duration::ZERO,
        }
    }

    /// Takes a token at `now` if there is one. Time that runs backwards (a clock set back)
    /// refills nothing and restarts the count from `now`.
    pub fn take(&mut self, now: Duration) -> bool {
        self.refill(now);
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }

    fn refill(&mut self, now: Duration) {
        let Some(elapsed) = now.checked_sub(self.last) else {
            self.last = now;
            return;
        };
        let step = self.interval.as_nanos().max(1);
        let whole = elapsed.as_nanos() / step;
        if whole == 0 {
            return;
        }
        let room = u128::from(self.burst - self.tokens);
        if whole >= room {
            self.tokens = self.burst;
            self.last = now;
        } else {
            // `whole` < `room` ≤ `burst`: fits a u32. The remainder of an interval is kept.
            self.tokens += whole as u32;
            self.last += self.interval * whole as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(m: u64) -> Duration {
        Duration::from_millis(m)
    }

    /// RFC 1812 §4.3.2.8: "the router may ... [use] a token bucket": a burst, then the
    /// sustained rate, never more.
    #[test]
    fn a_burst_then_one_per_interval() {
        let mut b = TokenBucket::full(3, ms(100));
        assert!((0..3).all(|_| b.take(ms(0))), "the burst");
        assert!(!b.take(ms(0)));
        assert!(!b.take(ms(99)), "not a whole interval yet");
        assert!(b.take(ms(100)));
        assert!(!b.take(ms(150)));
        assert!(b.take(ms(200)), "the half interval before was kept");
        assert!(!b.take(ms(200)));
    }

    #[test]
    fn a_long_silence_refills_only_the_burst() {
        let mut b = TokenBucket::full(3, ms(100));
        assert!((0..3).all(|_| b.take(ms(0))));
        let later = Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| b.take(later)).count(), 3);
    }

    #[test]
    fn a_clock_set_back_refills_nothing() {
        let mut b = TokenBucket::full(2, ms(100));
        assert!(b.take(ms(1000)) && b.take(ms(1000)));
        assert!(!b.take(ms(500)), "back in time: nothing refilled");
        assert!(!b.take(ms(599)));
        assert!(b.take(ms(600)), "counted again from the earlier time");
    }
}
