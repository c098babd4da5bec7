// Writes keypoints the way the C++ DescriptorWorkbench's `keypoint_manager export-csv` does
// (src/cli/keypoint_manager/commands/import_export.cpp, exportCsv): per image one file
// <out>/<scene>/<k>ppm.csv, a header line, then one line per keypoint with the float fields
// printed by std::ostream's default formatting (6 significant digits, %g style), ints as ints,
// each line ended by std::endl. Input (make_fixtures.py): lines "scene image x y size angle
// response octave class_id" with the float fields as hexadecimal floats (exact float32 values).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

struct Kp {
    float x, y, size, angle, response;
    int octave, class_id;
};

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: dw_writer <keypoints.txt> <out_folder>" << std::endl;
        return 2;
    }
    std::ifstream in(argv[1]);
    std::map<std::pair<std::string, int>, std::vector<Kp>> by_image;
    std::string scene, xs, ys, ss, as, rs;
    int image, octave, class_id;
    while (in >> scene >> image >> xs >> ys >> ss >> as >> rs >> octave >> class_id) {
        Kp kp{std::strtof(xs.c_str(), nullptr), std::strtof(ys.c_str(), nullptr), std::strtof(ss.c_str(), nullptr),
              std::strtof(as.c_str(), nullptr), std::strtof(rs.c_str(), nullptr), octave, class_id};
        by_image[{scene, image}].push_back(kp);
    }
    for (const auto& entry : by_image) {
        const std::string path = std::string(argv[2]) + "/" + entry.first.first + "/" +
                                 std::to_string(entry.first.second) + "ppm.csv";
        std::ofstream file(path);
        file << "x,y,size,angle,response,octave,class_id" << std::endl;
        for (const auto& kp : entry.second) {
            file << kp.x << "," << kp.y << "," << kp.size << "," << kp.angle << "," << kp.response << ","
                 << kp.octave << "," << kp.class_id << std::endl;
        }
    }
    return 0;
}
