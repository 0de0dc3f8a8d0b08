//! placeholder
#[cfg(test)]
mod tests {
    use tch::{Device, Kind, Tensor};
    #[test]
    fn smoke() {
        let crow = Tensor::from_slice(&[0i64, 2, 3, 4]);
        let col = Tensor::from_slice(&[0i64, 1, 1, 2]);
        let val = Tensor::from_slice(&[1f32, 2., 3., 4.]);
        let a = Tensor::sparse_csr_tensor_crow_col_value_size(&crow, &col, &val, [3, 3], (Kind::Float, Device::Cpu));
        let w = Tensor::ones([3, 2], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let y = a.mm(&w);
        y.print();
        y.sum(Kind::Float).backward();
        w.grad().print();
        println!("threads {}", tch::get_num_threads());
    }
}
