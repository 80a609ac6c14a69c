// Talking to running workloads (no vscode import): discovery via proc files, one-shot JSON requests.
export { sendRequest, ping, emptyCache, snapshot, mark, ControlError } from './client';
export type { ControlReply, PingReply, EmptyCacheReply, SnapshotReply } from './client';
export { listProcesses, liveProcesses, readProcFile, isAlive, listSessions } from './discover';
export type { ProcInfo } from './discover';
