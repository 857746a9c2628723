/* pause: the sandbox process of the lab's pod image (containerd.go). It holds
 * the pod's namespaces, reaps what is reparented to it, and exits on SIGTERM
 * or SIGINT, as the pause of Kubernetes does. Built with gcc -static. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void bye(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
	signal(SIGTERM, bye);
	signal(SIGINT, bye);
	signal(SIGCHLD, reap);
	for (;;) pause();
}
