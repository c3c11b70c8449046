// SPDX-License-Identifier: GPL-2.0
/*
 * The program from the field: asks the time in a loop the way a JVM
 * application does, knowing nothing of pvread.
 *
 *   java TimeLoop N
 *
 * N calls of System.currentTimeMillis() and N of System.nanoTime(), in
 * turn, after a warm-up that lets the JIT compile the loop.  Prints the
 * calls per second of each and how many values went backwards (none may:
 * the test machine's clock is not stepped meanwhile); exit 1 if any did.
 */
public final class TimeLoop {
	public static void main(String[] args) {
		long n = Long.parseLong(args[0]);
		long sink = 0, millisBack = 0, nanosBack = 0;

		/* warm-up: compiled before it is timed */
		for (int i = 0; i < 20000; i++)
			sink += System.currentTimeMillis() + System.nanoTime();

		long t0 = System.nanoTime();
		long prev = System.currentTimeMillis();
		for (long i = 0; i < n; i++) {
			long v = System.currentTimeMillis();
			if (v < prev)
				millisBack++;
			prev = v;
		}
		long t1 = System.nanoTime();
		long prevNs = System.nanoTime();
		for (long i = 0; i < n; i++) {
			long v = System.nanoTime();
			if (v < prevNs)
				nanosBack++;
			prevNs = v;
		}
		long t2 = System.nanoTime();

		System.out.printf("TimeLoop: %d currentTimeMillis calls in %.3f s (%.0f per s, %d backwards); "
				  + "%d nanoTime calls in %.3f s (%.0f per s, %d backwards)%n",
				  n, (t1 - t0) / 1e9, n * 1e9 / (t1 - t0), millisBack,
				  n, (t2 - t1) / 1e9, n * 1e9 / (t2 - t1), nanosBack);
		if (sink == 42)
			System.out.println();
		System.exit(millisBack + nanosBack == 0 ? 0 : 1);
	}
}
