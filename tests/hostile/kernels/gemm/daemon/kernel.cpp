#include <sys/wait.h>
#include <unistd.h>

// The first call in a process leaves a daemon behind: fork, setsid (a new session, out of the
// job's process group), fork again and exit, so the grandchild is re-parented away from the job.
static bool started = false;

extern "C" void gemm_daemon(const float* A, const float* B, float* C, int M, int N, int K) {
    if (!started) {
        started = true;
        pid_t child = fork();
        if (child == 0) {
            setsid();
            if (fork() == 0) {
                execl("/bin/sleep", "sleep", "600", (char*)nullptr);
                _exit(127);
            }
            _exit(0);
        }
        waitpid(child, nullptr, 0);
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
            C[(long)i * N + j] = acc;
        }
}
