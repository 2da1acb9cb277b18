"""Objects defined in __main__ pickle by reference and reach spawned workers."""

import multiprocessing
import pickle


class Point:
    def __init__(self, x):
        self.x = x


def square(point):
    return point.x * point.x


if __name__ == "__main__":
    print(pickle.dumps(Point, protocol=4))
    print(pickle.loads(pickle.dumps(Point(3))).x)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(square, [Point(n) for n in range(5)]))
