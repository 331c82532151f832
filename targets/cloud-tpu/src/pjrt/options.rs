//! `xla.CompileOptionsProto`, hand-written as prost messages (only the fields this crate sets).
//!
//! Field numbers from openxla/xla `xla/pjrt/proto/compile_options.proto` (CompileOptionsProto,
//! ExecutableBuildOptionsProto) and `xla/xla_data.proto` (DeviceAssignmentProto). Protobuf ignores fields a reader
//! does not know and defaults the ones we leave out, so a subset is a valid message.

use prost::Message;

/// `xla.CompileOptionsProto` (subset).
#[derive(Clone, PartialEq, Message)]
pub struct CompileOptionsProto {
    /// Field 3.
    #[prost(message, optional, tag = "3")]
    pub executable_build_options: Option<ExecutableBuildOptionsProto>,
    /// Field 4: compile for any device of the platform instead of a fixed assignment.
    #[prost(bool, tag = "4")]
    pub compile_portable_executable: bool,
}

/// `xla.ExecutableBuildOptionsProto` (subset).
#[derive(Clone, PartialEq, Message)]
pub struct ExecutableBuildOptionsProto {
    /// Field 1: -1 for "not set".
    #[prost(int64, tag = "1")]
    pub device_ordinal: i64,
    /// Field 4.
    #[prost(int64, tag = "4")]
    pub num_replicas: i64,
    /// Field 5.
    #[prost(int64, tag = "5")]
    pub num_partitions: i64,
    /// Field 6.
    #[prost(bool, tag = "6")]
    pub use_spmd_partitioning: bool,
    /// Field 9.
    #[prost(message, optional, tag = "9")]
    pub device_assignment: Option<DeviceAssignmentProto>,
    /// Field 19: partition with Shardy (the `sdy` dialect's shardings) instead of GSPMD.
    #[prost(bool, tag = "19")]
    pub use_shardy_partitioner: bool,
}

/// `xla.DeviceAssignmentProto`.
#[derive(Clone, PartialEq, Message)]
pub struct DeviceAssignmentProto {
    /// Field 1.
    #[prost(int32, tag = "1")]
    pub replica_count: i32,
    /// Field 2.
    #[prost(int32, tag = "2")]
    pub computation_count: i32,
    /// Field 3: one entry per computation (partition), listing the device id of each replica.
    #[prost(message, repeated, tag = "3")]
    pub computation_devices: Vec<ComputationDevice>,
}

/// `xla.DeviceAssignmentProto.ComputationDevice`.
#[derive(Clone, PartialEq, Message)]
pub struct ComputationDevice {
    /// Field 1.
    #[prost(int64, repeated, tag = "1")]
    pub replica_device_ids: Vec<i64>,
}

/// How to compile a program: replicas (data parallelism), partitions (SPMD model parallelism) and, optionally,
/// which device runs which (replica, partition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// Number of replicas (copies of the program on different devices, each with its own inputs).
    pub num_replicas: usize,
    /// Number of SPMD partitions.
    pub num_partitions: usize,
    /// `assignment[replica][partition]` = device id; `None` lets the plugin choose its default assignment.
    pub device_assignment: Option<Vec<Vec<i64>>>,
    /// Partition with the SPMD partitioner (needed when `num_partitions > 1`).
    pub use_spmd_partitioning: bool,
    /// Use Shardy (shardings written in the `sdy` dialect) rather than GSPMD (`mhlo.sharding`).
    pub use_shardy_partitioner: bool,
    /// Compile for "any device": the executable then runs on the device passed to
    /// [`super::LoadedExecutable::execute`] (single-device programs only). Otherwise it runs on its assignment.
    pub portable: bool,
}

impl Default for CompileOptions {
    /// One replica, one partition, default device.
    fn default() -> CompileOptions {
        CompileOptions {
            num_replicas: 1,
            num_partitions: 1,
            device_assignment: None,
            use_spmd_partitioning: false,
            use_shardy_partitioner: false,
            portable: false,
        }
    }
}

impl CompileOptions {
    /// One replica on the device with global id `id`.
    pub fn on_device(id: i32) -> CompileOptions {
        CompileOptions { device_assignment: Some(vec![vec![id as i64]]), ..CompileOptions::default() }
    }

    /// One replica that can run on any device (see [`CompileOptions::portable`]).
    pub fn portable() -> CompileOptions {
        CompileOptions { portable: true, ..CompileOptions::default() }
    }

    /// The proto message. `num_replicas` and `num_partitions` are always set: the CPU plugin aborts on a
    /// `CompileOptionsProto` without executable build options.
    pub fn to_proto(&self) -> CompileOptionsProto {
        let device_assignment = self.device_assignment.as_ref().map(|a| DeviceAssignmentProto {
            replica_count: a.len() as i32,
            computation_count: a.first().map_or(0, |r| r.len()) as i32,
            computation_devices: (0..a.first().map_or(0, |r| r.len()))
                .map(|p| ComputationDevice { replica_device_ids: a.iter().map(|r| r.get(p).copied().unwrap_or(-1)).collect() })
                .collect(),
        });
        CompileOptionsProto {
            executable_build_options: Some(ExecutableBuildOptionsProto {
                device_ordinal: -1,
                num_replicas: self.num_replicas.max(1) as i64,
                num_partitions: self.num_partitions.max(1) as i64,
                use_spmd_partitioning: self.use_spmd_partitioning,
                device_assignment,
                use_shardy_partitioner: self.use_shardy_partitioner,
            }),
            compile_portable_executable: self.portable,
        }
    }

    /// The serialized proto, as `PJRT_Client_Compile` takes it.
    pub fn encode(&self) -> Vec<u8> {
        self.to_proto().encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_field_numbers_of_the_xla_protos() {
        let o = CompileOptions { num_replicas: 2, device_assignment: Some(vec![vec![0], vec![3]]), ..CompileOptions::default() };
        let bytes = o.encode();
        // Field 3 (executable_build_options), length-delimited: tag byte (3 << 3) | 2 = 0x1a.
        assert_eq!(bytes[0], 0x1a);
        let inner = &bytes[2..];
        // device_ordinal = -1 is field 1 varint (0x08) followed by the 10-byte two's complement encoding.
        assert_eq!(&inner[..2], &[0x08, 0xff]);
        // num_replicas = 2: field 4 varint (0x20), num_partitions = 1: field 5 varint (0x28).
        assert!(inner.windows(2).any(|w| w == [0x20, 2]));
        assert!(inner.windows(2).any(|w| w == [0x28, 1]));
        let back = CompileOptionsProto::decode(bytes.as_slice()).unwrap();
        let da = back.executable_build_options.unwrap().device_assignment.unwrap();
        assert_eq!((da.replica_count, da.computation_count), (2, 1));
        assert_eq!(da.computation_devices[0].replica_device_ids, vec![0, 3]);
    }
}
