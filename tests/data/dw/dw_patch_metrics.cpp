// Calls the C++ DescriptorWorkbench's patch metrics (src/core/benchmark/PatchMetrics.cpp,
// F-Sossi/DescriptorWorkbench commit b834e17) on cases read from a binary file, and writes what
// they return. Built and run by make_patch_metrics.py (this folder):
//
//   g++ -O2 -std=c++17 -I<dwb>/src/core/benchmark dw_patch_metrics.cpp <dwb>/src/core/benchmark/PatchMetrics.cpp
//       $(pkg-config --cflags --libs opencv4) -o dw_patch_metrics
//   dw_patch_metrics <cases.bin> <out.bin>
//
// Input, little-endian: int32 number of cases, then per case int32 n, m, d and float32 ref[n*d],
// target[n*d], negatives[m*d] (row-major). Output per case: int32 num_patches, correct_matches;
// float32 match_accuracy, average_precision (computeMatching), computeMAP, computeFPR95.
#include "PatchMetrics.hpp"

#include <cstdint>
#include <fstream>
#include <iostream>
#include <vector>

using thesis_project::benchmark::PatchMetrics;

static cv::Mat read_rows(std::ifstream& in, int rows, int cols) {
    cv::Mat m(rows, cols, CV_32F);
    if (rows > 0 && cols > 0) {
        in.read(reinterpret_cast<char*>(m.ptr<float>(0)), sizeof(float) * rows * cols);
    }
    return m;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: dw_patch_metrics <cases.bin> <out.bin>" << std::endl;
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    std::ofstream out(argv[2], std::ios::binary);
    int32_t cases = 0;
    in.read(reinterpret_cast<char*>(&cases), 4);
    for (int32_t c = 0; c < cases; ++c) {
        int32_t n = 0, m = 0, d = 0;
        in.read(reinterpret_cast<char*>(&n), 4);
        in.read(reinterpret_cast<char*>(&m), 4);
        in.read(reinterpret_cast<char*>(&d), 4);
        cv::Mat ref = read_rows(in, n, d);
        cv::Mat tgt = read_rows(in, n, d);
        cv::Mat neg = read_rows(in, m, d);
        if (!in) {
            std::cerr << "truncated input at case " << c << std::endl;
            return 1;
        }
        PatchMetrics::MatchResult r = PatchMetrics::computeMatching(ref, tgt);
        float map = PatchMetrics::computeMAP(ref, tgt);
        float fpr = PatchMetrics::computeFPR95(ref, tgt, neg);
        int32_t ints[2] = {r.num_patches, r.correct_matches};
        float floats[4] = {r.match_accuracy, r.average_precision, map, fpr};
        out.write(reinterpret_cast<const char*>(ints), sizeof(ints));
        out.write(reinterpret_cast<const char*>(floats), sizeof(floats));
    }
    return 0;
}
