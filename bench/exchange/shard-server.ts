/**
 * One parameter server shard in a process of its own, for `exchange`: its gRPC server on a free
 * loopback port, checkpoints under the directory given as the only argument. Prints
 * `listening <address>` once serving; stops on SIGTERM.
 */
import { PserverGrpcServer } from '../../services/pserver/src/grpc-server.js';
import { ParameterShard } from '../../services/pserver/src/parameter-shard.js';

const shard = new ParameterShard({ shard: 0, dataDir: process.argv[2]! });
const server = new PserverGrpcServer(shard, { host: '127.0.0.1', port: 0 });
const { address } = await server.start();
shard.start();
process.stdout.write(`listening ${address}\n`);
process.on('SIGTERM', () => {
  shard.endWaits();
  void server.stop(1_000).then(() => process.exit(0));
});
