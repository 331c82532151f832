//! Old-opset models imported fully and run on the CPU runtime: the results follow the old semantics.

use super::*;


/// Imports `m` fully and runs it on `inputs`.
fn run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = super::load_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).unwrap();
    crate::runtime::Session::new(g).unwrap().run(inputs).unwrap()
}

fn close(a: &Tensor, b: &[f32]) -> bool {
    let a = a.to_f64_vec();
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - *y as f64).abs() < 1e-5)
}

#[test]
fn old_opset_semantics_give_the_old_results() {
    // Softmax-11 axis=1 on [1, 2, 2]: one softmax over all four values (coerced to 2-D), not per column
    let x = Tensor::from_f32(vec![1, 2, 2], vec![0.0, 1.0, 2.0, 3.0]);
    let m = model(11, vec![node("Softmax", &["x"], &["y"], vec![ai("axis", 1)])], vec![fin("x", &[1, 2, 2])], &["y"], vec![]);
    let e: Vec<f32> = [0.0f32, 1.0, 2.0, 3.0].iter().map(|v| v.exp()).collect();
    let sum: f32 = e.iter().sum();
    let y = &run(&m, std::slice::from_ref(&x))[0];
    assert_eq!(y.shape, vec![1, 2, 2]);
    assert!(close(y, &e.iter().map(|v| v / sum).collect::<Vec<_>>()), "{y:?}");

    // Add-6 broadcast=1 axis=1: B [2] is aligned with dim 1 of A [1, 2, 2]
    let m = model(
        6,
        vec![node("Add", &["x", "b"], &["y"], vec![ai("broadcast", 1), ai("axis", 1)])],
        vec![fin("x", &[1, 2, 2])],
        &["y"],
        vec![tf32("b", &[2], &[10.0, 20.0])],
    );
    assert!(close(&run(&m, std::slice::from_ref(&x))[0], &[10.0, 11.0, 22.0, 23.0]));

    // Upsample-7 nearest [1, 1, 1, 2] by (1, 1, 2, 2): each value repeated in a 2x2 block
    let m = model(
        7,
        vec![node("Upsample", &["x"], &["y"], vec![afs("scales", &[1.0, 1.0, 2.0, 2.0])])],
        vec![fin("x", &[1, 1, 1, 2])],
        &["y"],
        vec![],
    );
    let y = &run(&m, &[Tensor::from_f32(vec![1, 1, 1, 2], vec![1.0, 2.0])])[0];
    assert_eq!(y.shape, vec![1, 1, 2, 4]);
    assert!(close(y, &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]));

    // Clip-6 with only min: max defaults to the largest float
    let m = model(6, vec![node("Clip", &["x"], &["y"], vec![af("min", 1.5)])], vec![fin("x", &[1, 2, 2])], &["y"], vec![]);
    assert!(close(&run(&m, std::slice::from_ref(&x))[0], &[1.5, 1.5, 2.0, 3.0]));

    // Slice-1 attributes; Pad-2 pads/value attributes
    let m = model(
        1,
        vec![node("Slice", &["x"], &["y"], vec![ais("starts", &[1]), ais("ends", &[2]), ais("axes", &[2])])],
        vec![fin("x", &[1, 2, 2])],
        &["y"],
        vec![],
    );
    assert!(close(&run(&m, std::slice::from_ref(&x))[0], &[1.0, 3.0]));
    let m = model(
        2,
        vec![node("Pad", &["x"], &["y"], vec![ais("pads", &[0, 0, 1, 0, 0, 0]), af("value", 9.0)])],
        vec![fin("x", &[1, 2, 2])],
        &["y"],
        vec![],
    );
    assert!(close(&run(&m, &[x])[0], &[9.0, 0.0, 1.0, 9.0, 2.0, 3.0]));
}
