// Talking to running workloads (no vscode import): one-shot JSON requests over a process's control socket
// (which processes run, and where their sockets are: ../sessionFolder/discover.ts).
export { sendRequest, ping, emptyCache, snapshot, mark, ControlError } from './client';
export type { ControlReply, PingReply, EmptyCacheReply, SnapshotReply } from './client';
