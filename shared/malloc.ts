/**
 * glibc's mmap threshold for the exporter's processes, in bytes: a native allocation of this size
 * or more (zstd's contexts for each Parquet page, decoded column chunks, file reads) is its own
 * mapping, given back to the system when freed. Without it glibc raises its threshold as such
 * blocks are freed and serves them from its heap, which it keeps: memory outside V8 that grows
 * with a process's work, for the same CPU (BENCHMARKS.md, scale and cli-memory). glibc reads it
 * from the environment (`MALLOC_MMAP_THRESHOLD_`) when a process starts: the Lambda functions get
 * it in theirs (infra/constructs/exporter-function.ts), the packaged CLI by starting Node again
 * (functions/cli/reexec.ts).
 */
export const MALLOC_MMAP_THRESHOLD_BYTES = 131_072;
