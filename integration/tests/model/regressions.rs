//! Every sequence the model ever failed, one test each, named for the
//! defect it found. Pasted from the explorer's output.

#![allow(unused_imports)]

use super::ops::{Dur::*, End::*, Op::*, Payload::*, Rec::*};
use super::sut::{self, Backend};

/// Runs a pasted sequence; the model must allow every answer.
async fn check(backend: Backend, ops: Vec<super::ops::Op>) {
    if let Err(why) = sut::run(backend, &ops, &Default::default()).await {
        panic!("{why}");
    }
}
