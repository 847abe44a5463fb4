//! The typed convention's encodings, checked end to end on the host.

use super::*;

#[test]
fn only_slices_strs_and_a_large_fixed_part_send_input_bytes() {
    let word = <u64 as Arg>::SHAPE;
    assert!(!reads_input(&[]));
    assert!(!reads_input(&[word, word, word, word, word]));
    assert!(!reads_input(&[word, <&mut [u8] as Arg>::SHAPE]));
    assert!(!reads_input(&[<DeviceSlice as Arg>::SHAPE]));
    assert!(reads_input(&[<&[u8] as Arg>::SHAPE]));
    assert!(reads_input(&[word, <&str as Arg>::SHAPE]));
    assert!(reads_input(&[word; 6]), "48 bytes, over the slot's 40");
}

#[test]
fn plain_values_and_slices_round_trip_through_the_fixed_part_and_the_bulk() {
    let mut e = Encoder::<'_, 5>::default();
    (-3i64).put(&mut e);
    "héllo".put(&mut e);
    (&[1u8, 2, 3][..]).put(&mut e);
    2.5f32.put(&mut e);
    let mut out = [0u8; 16];
    (&mut out[..]).put(&mut e);
    let shapes = [
        Shape::of::<i64>(),
        <&str as Arg>::SHAPE,
        <&[u8] as Arg>::SHAPE,
        Shape::of::<f32>(),
        <&mut [u8] as Arg>::SHAPE,
    ];
    assert_eq!(e.fixed().len(), fixed_len(&shapes));
    assert!(fixed_len(&shapes) <= FIXED_INLINE);
    let mut args = [0u64; 6];
    args[1..].copy_from_slice(&e.fixed_words());
    let mut bulk = [0u8; 64];
    let mut at = 0;
    for p in e.inputs() {
        at = round_up(at, 8);
        bulk[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    assert_eq!(at, bulk_len(e.inputs()));
    let ab = args_bytes(&args);
    let mut room = [0xffu8; 64];
    let mut d = Decoder::new(fixed_len(&shapes), &ab, &bulk[..at], &mut room, None).unwrap();
    assert_eq!(i64::take(&mut d), Ok(-3));
    assert_eq!(<&str>::take(&mut d), Ok("héllo"));
    assert_eq!(<&[u8]>::take(&mut d), Ok(&[1u8, 2, 3][..]));
    assert_eq!(f32::take(&mut d), Ok(2.5));
    let o = <&mut [u8]>::take(&mut d).unwrap();
    assert_eq!(o, &[0u8; 16][..], "the output buffer starts zeroed");
    let answer = answer_bytes(&shapes, 4);
    assert_eq!(
        answer.of(&args, &bulk[..at]),
        Some(16),
        "the output buffer's length"
    );
}

#[test]
fn an_answer_fills_the_bulk_only_with_an_output_buffer_or_a_large_value() {
    let word = <u64 as Arg>::SHAPE;
    let args = [0u64; 6];
    assert_eq!(answer_bytes(&[word], 8), AnswerBytes::Nothing);
    assert_eq!(answer_bytes(&[word], VALUE_WORDS), AnswerBytes::Nothing);
    assert_eq!(answer_bytes(&[], 40), AnswerBytes::Value(40));
    assert_eq!(answer_bytes(&[], 40).of(&args, &[]), Some(40));
    // A fixed part over the slot's 40 bytes travels first in the bytes sent, and the
    // output buffer's length with it.
    let shapes = [word, word, word, word, word, <&mut [u8] as Arg>::SHAPE];
    let answer = answer_bytes(&shapes, 8);
    assert_eq!(
        answer,
        AnswerBytes::Output {
            at: 40,
            inline: false
        }
    );
    let mut sent = [0u8; 48];
    sent[40..].copy_from_slice(&64u64.to_le_bytes());
    assert_eq!(answer.of(&args, &sent), Some(64));
    assert_eq!(
        answer.of(&args, &sent[..40]),
        None,
        "a request too short to say"
    );
}

#[test]
fn a_length_past_the_bytes_sent_is_refused() {
    let mut args = [0u64; 6];
    args[1] = 1000;
    let ab = args_bytes(&args);
    let shapes = [<&[u8] as Arg>::SHAPE];
    let mut room = [0u8; 8];
    let mut d = Decoder::new(fixed_len(&shapes), &ab, &[0u8; 16], &mut room, None).unwrap();
    assert!(<&[u8]>::take(&mut d).is_err());
    let mut room = [0u8; 8];
    let mut d = Decoder::new(8, &ab, &[], &mut room, None).unwrap();
    assert!(
        <&mut [u8]>::take(&mut d).is_err(),
        "an output over the room"
    );
}

#[test]
fn values_travel_in_the_result_the_words_or_the_bulk() {
    let mut bulk = [0u8; 128];
    let a = Answered::encode(Ok(-1.5f32), &mut bulk, 0);
    assert!(a.result >= 0 && a.words.is_none());
    assert_eq!(Answered::decode::<f32>(a.result, None, &[]), Ok(-1.5));
    let a = Answered::encode(Ok(u64::MAX), &mut bulk, 0);
    assert_eq!(a.result, 0);
    let w = a.words.unwrap();
    assert_eq!(
        Answered::decode::<u64>(a.result, Some(&w), &[]),
        Ok(u64::MAX)
    );
    let a = Answered::encode(Ok(12345u64), &mut bulk, 0);
    assert_eq!(
        (a.result, a.words),
        (12345, None),
        "a small u64 fits the result"
    );
    assert_eq!(Answered::decode::<u64>(a.result, None, &[]), Ok(12345));
    let a = Answered::encode(Ok(12345u64), &mut bulk, 10);
    let w = a.words.expect("beside an output buffer, in the words");
    assert_eq!(Answered::decode::<u64>(a.result, Some(&w), &[]), Ok(12345));
    let a = Answered::encode(Ok(-1i64), &mut bulk, 0);
    assert!(a.words.is_some(), "negative bits do not fit the result");
    assert_eq!(
        Answered::decode::<i64>(a.result, a.words.as_ref(), &[]),
        Ok(-1)
    );
    let a = Answered::encode(Ok([1u32, 2, 3]), &mut bulk, 0);
    assert_eq!(
        Answered::decode::<[u32; 3]>(a.result, a.words.as_ref(), &[]),
        Ok([1, 2, 3])
    );
    let big = [7u64; 9];
    let a = Answered::encode(Ok(big), &mut bulk, 0);
    assert_eq!(a.bulk_out, 72);
    assert_eq!(Answered::decode::<[u64; 9]>(0, None, &bulk[..72]), Ok(big));
    let a = Answered::encode::<u64>(Err(Errno(2)), &mut bulk, 0);
    assert_eq!(Answered::decode::<u64>(a.result, None, &[]), Err(Errno(2)));
}

#[test]
fn fingerprints_tell_signatures_layouts_and_ids_apart() {
    const TEXT: &str = "fn f(&self, x: f32) -> f32";
    let (f32s, f64s) = ([Shape::of::<f32>()], [Shape::of::<f64>()]);
    let print = |text, id, args: &[Shape]| fingerprint("A.f", text, id, args, Shape::of::<f32>());
    let base = print(TEXT, 0, &f32s);
    assert_ne!(
        base,
        print("fn f(&self, x: f64) -> f32", 0, &f32s),
        "the text"
    );
    assert_ne!(base, print(TEXT, 0, &f64s), "an argument's layout");
    assert_ne!(base, print(TEXT, 9, &f32s), "the id");
    assert_eq!(base, print(TEXT, 0, &f32s));
}

#[test]
fn closures_of_other_types_have_other_fingerprints() {
    let f = closure_fingerprint::<(f32,), f32>();
    assert_ne!(f, closure_fingerprint::<(i32,), i32>());
    assert_ne!(f, closure_fingerprint::<(f32,), Result<f32, Errno>>());
    assert_ne!(f, closure_fingerprint::<(f32, f32), f32>());
    assert_eq!(f, closure_fingerprint::<(f32,), f32>());
}

#[test]
fn slots_parse_back() {
    const TEXT: &str = "fn f(&self) -> u32";
    let sig = Signature {
        name: "A.f",
        text: TEXT,
        id: 7,
        fingerprint: 0x1234_5678_9abc_def0,
        reads_input: false,
        waits: Waits::Never,
        answer: AnswerBytes::Nothing,
    };
    let slot = ServiceSlot::<{ 3 + TEXT.len() }>::new(&sig);
    // SAFETY: the slot is repr(C) plain data; reading its bytes is what the host does.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            (&raw const slot).cast::<u8>(),
            size_of::<ServiceSlot<{ 3 + TEXT.len() }>>(),
        )
    };
    assert_eq!(bytes[..SLOT_HEADER], sig.slot_header());
    assert_eq!(&bytes[SLOT_HEADER..SLOT_HEADER + 3], b"A.f");
    let r = SlotRecord::parse(bytes).unwrap();
    assert_eq!(
        r,
        SlotRecord {
            id: 7,
            name: "A.f",
            text: TEXT,
            fingerprint: sig.fingerprint
        }
    );
}
