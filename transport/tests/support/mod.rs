pub(crate) mod overload;
