// descbench's harness: cv::warpAffine (INTER_LINEAR, BORDER_REPLICATE) of a uint8 grey image for a list
// of forward 2 x 3 matrices, with the C++ OpenCV it is built against (make_warp_fixtures.py).
// Input file: int32 h, w, n, count; h * w uint8 image bytes (row-major); count * 6 float64 matrices.
// Output file: count * n * n uint8 patches (row-major), in input order.
#include <opencv2/imgproc.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: dw_warp IN OUT\n"); return 2; }
    std::FILE* in = std::fopen(argv[1], "rb");
    if (!in) { std::perror(argv[1]); return 1; }
    int head[4];
    if (std::fread(head, sizeof(int), 4, in) != 4) return 1;
    const int h = head[0], w = head[1], n = head[2], count = head[3];
    cv::Mat img(h, w, CV_8U);
    std::vector<double> m(6 * static_cast<size_t>(count));
    if (std::fread(img.data, 1, static_cast<size_t>(h) * w, in) != static_cast<size_t>(h) * w) return 1;
    if (std::fread(m.data(), sizeof(double), m.size(), in) != m.size()) return 1;
    std::fclose(in);
    std::FILE* out = std::fopen(argv[2], "wb");
    if (!out) { std::perror(argv[2]); return 1; }
    for (int i = 0; i < count; ++i) {
        cv::Mat M(2, 3, CV_64F, &m[6 * static_cast<size_t>(i)]), patch;
        cv::warpAffine(img, patch, M, cv::Size(n, n), cv::INTER_LINEAR, cv::BORDER_REPLICATE);
        std::fwrite(patch.data, 1, static_cast<size_t>(n) * n, out);
    }
    std::fclose(out);
    return 0;
}
