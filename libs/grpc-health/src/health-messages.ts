import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';

/**
 * `grpc.health.v1.HealthCheckResponse.ServingStatus`, by the numbers of the standard
 * `health.proto` (https://github.com/grpc/grpc/blob/master/doc/health-checking.md).
 */
export const ServingStatus = {
  UNKNOWN: 0,
  SERVING: 1,
  NOT_SERVING: 2,
  SERVICE_UNKNOWN: 3,
} as const;

/** One of {@link ServingStatus}'s names. */
export type ServingStatusName = keyof typeof ServingStatus;

/** `grpc.health.v1.HealthCheckRequest`: `string service = 1;` (empty: the whole server). */
export interface HealthCheckRequest {
  service: string;
}

/** `grpc.health.v1.HealthCheckResponse`: `ServingStatus status = 1;`. */
export interface HealthCheckResponse {
  status: ServingStatusName;
}

const NAMES = Object.fromEntries(Object.entries(ServingStatus).map(([name, n]) => [n, name])) as Record<
  number,
  ServingStatusName
>;

/** Encodes a request (field 1, length-delimited). */
export function encodeHealthCheckRequest(m: HealthCheckRequest): Buffer {
  const w = new BinaryWriter();
  if (m.service !== '') w.uint32((1 << 3) | WireType.LengthDelimited).string(m.service);
  return Buffer.from(w.finish());
}

/** Decodes a request; unknown fields are skipped, as protobuf readers do. */
export function decodeHealthCheckRequest(bytes: Uint8Array): HealthCheckRequest {
  const r = new BinaryReader(bytes);
  const m: HealthCheckRequest = { service: '' };
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) m.service = r.string();
    else r.skip(wireType);
  }
  return m;
}

/** Encodes a response (field 1, varint). */
export function encodeHealthCheckResponse(m: HealthCheckResponse): Buffer {
  const w = new BinaryWriter();
  const n = ServingStatus[m.status];
  if (n !== 0) w.uint32((1 << 3) | WireType.Varint).int32(n);
  return Buffer.from(w.finish());
}

/** Decodes a response; a status number this version does not know reads as `UNKNOWN`. */
export function decodeHealthCheckResponse(bytes: Uint8Array): HealthCheckResponse {
  const r = new BinaryReader(bytes);
  const m: HealthCheckResponse = { status: 'UNKNOWN' };
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1 && wireType === WireType.Varint) m.status = NAMES[r.int32()] ?? 'UNKNOWN';
    else r.skip(wireType);
  }
  return m;
}
