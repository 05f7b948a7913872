//! Fuzz target `pem`: the body is `extpath::fuzzing::Target::run`, shared with the stable
//! regression test that replays `fuzz/regressions/pem/`.
#![no_main]

use extpath::fuzzing::Target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let target = Target::from_name("pem").expect("a target of extpath::fuzzing");
    let _ = target.run(data);
});
